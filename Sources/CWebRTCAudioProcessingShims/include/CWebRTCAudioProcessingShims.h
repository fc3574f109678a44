#ifndef CWEBRTC_AUDIO_PROCESSING_SHIMS_H
#define CWEBRTC_AUDIO_PROCESSING_SHIMS_H

// A small C API over webrtc-audio-processing's C++ `webrtc::AudioProcessing` (Debian's 0.3), so
// that Swift reaches it without C++ interop: one processor per microphone, 10 ms frames of 48 kHz
// mono Int16 in each direction. The implementation converts to the library's float interface.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// An opaque `webrtc::AudioProcessing` with its stream configuration.
typedef struct cwap_processor cwap_processor;

/// Which components run; each is 0 (off) or 1 (on).
typedef struct cwap_options {
    int echo_cancellation;
    int noise_suppression;
    int gain_control;
    int high_pass_filter;
    /// The echo suppressor's aggressiveness: 0 low, 1 moderate, 2 high.
    int suppression_level;
} cwap_options;

/// Samples in one frame: 10 ms at 48 kHz, mono.
#define CWAP_FRAME_SAMPLES 480

/// Creates a processor, NULL when the library refuses (it logs nothing of its own).
cwap_processor *cwap_create(const cwap_options *options);

void cwap_destroy(cwap_processor *processor);

/// Feeds one frame of what the speaker plays (the echo reference). Returns the library's error
/// code: 0 on success.
int cwap_process_reverse(cwap_processor *processor, const int16_t *samples, size_t count);

/// Processes one frame of the microphone in place. Returns 0 on success.
int cwap_process(cwap_processor *processor, int16_t *samples, size_t count);

/// The delay between a frame reaching `cwap_process_reverse` and its echo reaching `cwap_process`,
/// in milliseconds; set before each `cwap_process` when echo cancellation is on.
int cwap_set_stream_delay_ms(cwap_processor *processor, int delay_ms);

/// Whether the canceller found echo in the last microphone frame: 1 or 0, -1 when it is off.
int cwap_stream_has_echo(cwap_processor *processor);

#ifdef __cplusplus
}
#endif

#endif
