#pragma once
// Shims for libopus, libvpx and openh264, used only by ConclaveOpus, ConclaveVPX and ConclaveOpenH264.
//
// - libopus configures encoders through the variadic `opus_encoder_ctl(enc, OPUS_SET_x(v))` macro
//   pair, which Swift can neither expand nor call; each setting gets a typed function here.
// - libvpx's `vpx_codec_enc_init` / `vpx_codec_dec_init` are macros that pass the ABI version.
// - openh264's C API is a table of function pointers reached through a double pointer
//   (`(*encoder)->EncodeFrame(encoder, ...)`); the wrappers keep that calling convention in one place
//   and give Swift plain functions with checked arguments.
#include <opus/opus.h>
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>
#include <wels/codec_api.h>
#include <wels/codec_app_def.h>
#include <wels/codec_def.h>
#include <stdbool.h>

// --- libopus: variadic ctl requests ---
int cshim_opus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bitrate);
int cshim_opus_encoder_get_bitrate(OpusEncoder *enc, opus_int32 *bitrate);
int cshim_opus_encoder_set_inband_fec(OpusEncoder *enc, opus_int32 enabled);
int cshim_opus_encoder_set_packet_loss_perc(OpusEncoder *enc, opus_int32 percent);
int cshim_opus_encoder_set_dtx(OpusEncoder *enc, opus_int32 enabled);
int cshim_opus_encoder_set_complexity(OpusEncoder *enc, opus_int32 complexity);
int cshim_opus_encoder_get_lookahead(OpusEncoder *enc, opus_int32 *samples);

// --- libvpx: ABI-versioned init macros ---
vpx_codec_err_t cshim_vpx_codec_enc_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface,
                                         const vpx_codec_enc_cfg_t *cfg, vpx_codec_flags_t flags);
vpx_codec_err_t cshim_vpx_codec_dec_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface,
                                         const vpx_codec_dec_cfg_t *cfg, vpx_codec_flags_t flags);
/// `vpx_codec_control(ctx, id, int)` is variadic; every VP8 integer control we use goes through this.
vpx_codec_err_t cshim_vpx_codec_control_int(vpx_codec_ctx_t *ctx, int control_id, int value);

// --- openh264: vtable dispatch ---
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
