#include "COpenH264Shims.h"

int cshim_openh264_encoder_get_default_params(ISVCEncoder *encoder, SEncParamExt *params) {
    return (*encoder)->GetDefaultParams(encoder, params);
}
int cshim_openh264_encoder_initialize_ext(ISVCEncoder *encoder, const SEncParamExt *params) {
    return (*encoder)->InitializeExt(encoder, params);
}
int cshim_openh264_encoder_uninitialize(ISVCEncoder *encoder) {
    return (*encoder)->Uninitialize(encoder);
}
int cshim_openh264_encoder_encode_frame(ISVCEncoder *encoder, const SSourcePicture *picture, SFrameBSInfo *info) {
    return (*encoder)->EncodeFrame(encoder, picture, info);
}
int cshim_openh264_encoder_force_intra_frame(ISVCEncoder *encoder, bool idr) {
    return (*encoder)->ForceIntraFrame(encoder, idr);
}
int cshim_openh264_encoder_set_option(ISVCEncoder *encoder, ENCODER_OPTION option, void *value) {
    return (*encoder)->SetOption(encoder, option, value);
}
long cshim_openh264_decoder_initialize(ISVCDecoder *decoder, const SDecodingParam *params) {
    return (*decoder)->Initialize(decoder, params);
}
long cshim_openh264_decoder_uninitialize(ISVCDecoder *decoder) {
    return (*decoder)->Uninitialize(decoder);
}
long cshim_openh264_decoder_set_option(ISVCDecoder *decoder, DECODER_OPTION option, void *value) {
    return (*decoder)->SetOption(decoder, option, value);
}
DECODING_STATE cshim_openh264_decoder_decode_frame_no_delay(ISVCDecoder *decoder, const unsigned char *source,
                                                            int length, unsigned char **planes, SBufferInfo *info) {
    return (*decoder)->DecodeFrameNoDelay(decoder, source, length, planes, info);
}
