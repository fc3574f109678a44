// SDL2_ttf for the call window's name labels, imported by ConclaveWindow alone.
#define SDL_MAIN_HANDLED 1
#include <SDL_ttf.h>
