// SDL2, imported by ConclaveWindow alone (the one owner of SDL). SDL_MAIN_HANDLED: Conclave has
// its own entry point; SDL must not rename `main`.
#define SDL_MAIN_HANDLED 1
#include <SDL.h>
