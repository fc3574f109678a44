// Tests arrive with the module's code.
