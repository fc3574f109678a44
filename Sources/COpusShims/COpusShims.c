#include "COpusShims.h"

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
