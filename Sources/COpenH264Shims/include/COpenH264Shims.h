#pragma once
// openh264 shims, used only by ConclaveOpenH264.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
//
// openh264's C API is a table of function pointers reached through a double pointer
// (`(*encoder)->EncodeFrame(encoder, ...)`), which Swift cannot call as written; the wrappers keep
// that calling convention in one place and give Swift plain functions.
#include <wels/codec_api.h>
#include <wels/codec_app_def.h>
#include <wels/codec_def.h>
#include <stdbool.h>

int cshim_openh264_encoder_get_default_params(ISVCEncoder *encoder, SEncParamExt *params);
int cshim_openh264_encoder_initialize_ext(ISVCEncoder *encoder, const SEncParamExt *params);
int cshim_openh264_encoder_uninitialize(ISVCEncoder *encoder);
int cshim_openh264_encoder_encode_frame(ISVCEncoder *encoder, const SSourcePicture *picture, SFrameBSInfo *info);
int cshim_openh264_encoder_force_intra_frame(ISVCEncoder *encoder, bool idr);
int cshim_openh264_encoder_set_option(ISVCEncoder *encoder, ENCODER_OPTION option, void *value);
long cshim_openh264_decoder_initialize(ISVCDecoder *decoder, const SDecodingParam *params);
long cshim_openh264_decoder_uninitialize(ISVCDecoder *decoder);
long cshim_openh264_decoder_set_option(ISVCDecoder *decoder, DECODER_OPTION option, void *value);
DECODING_STATE cshim_openh264_decoder_decode_frame_no_delay(ISVCDecoder *decoder, const unsigned char *source,
                                                            int length, unsigned char **planes, SBufferInfo *info);
