#include "shims_codecs.h"

int cshim_opus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bitrate) {
    return opus_encoder_ctl(enc, OPUS_SET_BITRATE(bitrate));
}
int cshim_opus_encoder_get_bitrate(OpusEncoder *enc, opus_int32 *bitrate) {
    return opus_encoder_ctl(enc, OPUS_GET_BITRATE(bitrate));
}
int cshim_opus_encoder_set_inband_fec(OpusEncoder *enc, opus_int32 enabled) {
    return opus_encoder_ctl(enc, OPUS_SET_INBAND_FEC(enabled));
}
int cshim_opus_encoder_set_packet_loss_perc(OpusEncoder *enc, opus_int32 percent) {
    return opus_encoder_ctl(enc, OPUS_SET_PACKET_LOSS_PERC(percent));
}
int cshim_opus_encoder_set_dtx(OpusEncoder *enc, opus_int32 enabled) {
    return opus_encoder_ctl(enc, OPUS_SET_DTX(enabled));
}
int cshim_opus_encoder_set_complexity(OpusEncoder *enc, opus_int32 complexity) {
    return opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity));
}
int cshim_opus_encoder_get_lookahead(OpusEncoder *enc, opus_int32 *samples) {
    return opus_encoder_ctl(enc, OPUS_GET_LOOKAHEAD(samples));
}

vpx_codec_err_t cshim_vpx_codec_enc_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface,
                                         const vpx_codec_enc_cfg_t *cfg, vpx_codec_flags_t flags) {
    return vpx_codec_enc_init(ctx, iface, cfg, flags);
}
vpx_codec_err_t cshim_vpx_codec_dec_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface,
                                         const vpx_codec_dec_cfg_t *cfg, vpx_codec_flags_t flags) {
    return vpx_codec_dec_init(ctx, iface, cfg, flags);
}
vpx_codec_err_t cshim_vpx_codec_control_int(vpx_codec_ctx_t *ctx, int control_id, int value) {
    return vpx_codec_control_(ctx, control_id, value);
}

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
