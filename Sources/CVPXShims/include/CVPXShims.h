#pragma once
// libvpx shims, used only by ConclaveVPX.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
//
// `vpx_codec_enc_init` / `vpx_codec_dec_init` are macros that pass the ABI version, and
// `vpx_codec_control` is variadic.
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

vpx_codec_err_t cshim_vpx_codec_enc_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface,
                                         const vpx_codec_enc_cfg_t *cfg, vpx_codec_flags_t flags);
vpx_codec_err_t cshim_vpx_codec_dec_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface,
                                         const vpx_codec_dec_cfg_t *cfg, vpx_codec_flags_t flags);
/// `vpx_codec_control(ctx, id, int)` is variadic; every VP8 integer control we use goes through this.
vpx_codec_err_t cshim_vpx_codec_control_int(vpx_codec_ctx_t *ctx, int control_id, int value);
