// webrtc-audio-processing is a C++ library (webrtc::AudioProcessing), which Swift does not import:
// this module carries its pkg-config flags, its link line and, for C++ only, its header. Its one
// user is the C++ target CWebRTCAudioProcessingShims, whose C API ConclaveAudioProcessing calls.
#ifdef __cplusplus
#include <webrtc/modules/audio_processing/include/audio_processing.h>
#endif
