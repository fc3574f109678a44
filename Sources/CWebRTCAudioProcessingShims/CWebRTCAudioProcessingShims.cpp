#include "CWebRTCAudioProcessingShims.h"

#include <webrtc/modules/audio_processing/include/audio_processing.h>

#include <new>

// The library's Int16 interface takes its `AudioFrame` class from module_common_types.h, which
// pulls in much of WebRTC's headers; its float interface takes plain deinterleaved arrays, so the
// shim converts 480 samples each way on the stack instead.

struct cwap_processor {
    webrtc::AudioProcessing *apm;
    webrtc::StreamConfig stream;
};

namespace {

void to_float(const int16_t *samples, float *out) {
    for (size_t index = 0; index < CWAP_FRAME_SAMPLES; index++) {
        out[index] = static_cast<float>(samples[index]) / 32768.0f;
    }
}

void to_int16(const float *in, int16_t *samples) {
    for (size_t index = 0; index < CWAP_FRAME_SAMPLES; index++) {
        float value = in[index] * 32768.0f;
        if (value > 32767.0f) value = 32767.0f;
        if (value < -32768.0f) value = -32768.0f;
        samples[index] = static_cast<int16_t>(value >= 0 ? value + 0.5f : value - 0.5f);
    }
}

}  // namespace

extern "C" cwap_processor *cwap_create(const cwap_options *options) {
    webrtc::Config config;
    // The canceller finds the echo's delay itself: the delay a device reports is only an estimate,
    // and PulseAudio's latencies move. The extended filter stays off: measured on a continuous
    // near-end tone over far-end bursts it cut the near end by 19 dB instead of 8, for no more
    // echo removed (EchoCancellerTests).
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(true));
    webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
    if (apm == nullptr) return nullptr;
    bool ok = true;
    if (options->echo_cancellation) {
        ok = ok && apm->echo_cancellation()->enable_drift_compensation(false) == 0;
        webrtc::EchoCancellation::SuppressionLevel level =
            options->suppression_level <= 0   ? webrtc::EchoCancellation::kLowSuppression
            : options->suppression_level == 1 ? webrtc::EchoCancellation::kModerateSuppression
                                              : webrtc::EchoCancellation::kHighSuppression;
        ok = ok && apm->echo_cancellation()->set_suppression_level(level) == 0;
        ok = ok && apm->echo_cancellation()->Enable(true) == 0;
    }
    if (options->noise_suppression) {
        ok = ok && apm->noise_suppression()->set_level(webrtc::NoiseSuppression::kHigh) == 0;
        ok = ok && apm->noise_suppression()->Enable(true) == 0;
    }
    if (options->gain_control) {
        ok = ok && apm->gain_control()->set_mode(webrtc::GainControl::kAdaptiveDigital) == 0;
        ok = ok && apm->gain_control()->Enable(true) == 0;
    }
    if (options->high_pass_filter) {
        ok = ok && apm->high_pass_filter()->Enable(true) == 0;
    }
    cwap_processor *processor = ok ? new (std::nothrow) cwap_processor : nullptr;
    if (processor == nullptr) {
        delete apm;
        return nullptr;
    }
    processor->apm = apm;
    processor->stream = webrtc::StreamConfig(48000, 1);
    return processor;
}

extern "C" void cwap_destroy(cwap_processor *processor) {
    if (processor == nullptr) return;
    delete processor->apm;
    delete processor;
}

extern "C" int cwap_process_reverse(cwap_processor *processor, const int16_t *samples, size_t count) {
    if (count != CWAP_FRAME_SAMPLES) return webrtc::AudioProcessing::kBadDataLengthError;
    float buffer[CWAP_FRAME_SAMPLES];
    to_float(samples, buffer);
    float *channels[1] = {buffer};
    return processor->apm->ProcessReverseStream(channels, processor->stream, processor->stream, channels);
}

extern "C" int cwap_process(cwap_processor *processor, int16_t *samples, size_t count) {
    if (count != CWAP_FRAME_SAMPLES) return webrtc::AudioProcessing::kBadDataLengthError;
    float buffer[CWAP_FRAME_SAMPLES];
    to_float(samples, buffer);
    float *channels[1] = {buffer};
    int result = processor->apm->ProcessStream(channels, processor->stream, processor->stream, channels);
    if (result == 0) to_int16(buffer, samples);
    return result;
}

extern "C" int cwap_set_stream_delay_ms(cwap_processor *processor, int delay_ms) {
    return processor->apm->set_stream_delay_ms(delay_ms);
}

extern "C" int cwap_stream_has_echo(cwap_processor *processor) {
    if (!processor->apm->echo_cancellation()->is_enabled()) return -1;
    return processor->apm->echo_cancellation()->stream_has_echo() ? 1 : 0;
}
