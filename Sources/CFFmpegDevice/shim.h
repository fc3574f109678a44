// Umbrella header for the system library: only includes, its shims live in CFFmpegDeviceShims.
// libavdevice's inputs are libavformat demuxers, decoded with libavcodec and converted with
// libswscale, so the capture module reaches all four through this one module. V4L2's kernel header
// describes the cameras the device catalog lists.
#include <libavdevice/avdevice.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libswscale/swscale.h>
#include <libavutil/avutil.h>
#include <libavutil/dict.h>
#include <libavutil/pixdesc.h>
#include <linux/videodev2.h>
