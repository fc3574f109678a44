/// Placeholder until the module has code of its own.
enum ConclavePlaceholder {}
