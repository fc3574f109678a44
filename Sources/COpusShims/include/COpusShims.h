#pragma once
// libopus shims, used only by ConclaveOpus.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
//
// libopus configures encoders through the variadic `opus_encoder_ctl(enc, OPUS_SET_x(v))` macro pair,
// which Swift can neither expand nor call; each setting gets a typed function here.
#include <opus/opus.h>

int cshim_opus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bitrate);
int cshim_opus_encoder_get_bitrate(OpusEncoder *enc, opus_int32 *bitrate);
int cshim_opus_encoder_set_inband_fec(OpusEncoder *enc, opus_int32 enabled);
int cshim_opus_encoder_set_packet_loss_perc(OpusEncoder *enc, opus_int32 percent);
int cshim_opus_encoder_set_dtx(OpusEncoder *enc, opus_int32 enabled);
int cshim_opus_encoder_set_complexity(OpusEncoder *enc, opus_int32 complexity);
int cshim_opus_encoder_get_lookahead(OpusEncoder *enc, opus_int32 *samples);
