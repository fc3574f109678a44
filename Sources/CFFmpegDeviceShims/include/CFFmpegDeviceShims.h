#pragma once
// Shims for libavdevice and V4L2, used only by ConclaveCapture.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
//
// `ioctl` is variadic and the VIDIOC_* request numbers are function-like macros (`_IOWR`), neither
// of which Swift imports: each request the camera catalog makes is one typed function here.
#include <libavformat/avformat.h>
#include <linux/videodev2.h>

/// `AVERROR_EOF`: the input ended.
int cshim_device_AVERROR_EOF(void);
/// `AVERROR(EAGAIN)`: no packet yet (non-blocking inputs).
int cshim_device_AVERROR_EAGAIN(void);
/// `AV_PIX_FMT_YUV420P` as an int: libavutil's pixel format enum may belong to another module
/// (CFFmpeg's) when both are loaded, which hides its constants from this one.
int cshim_device_AV_PIX_FMT_YUV420P(void);

/// `ioctl(fd, VIDIOC_QUERYCAP, capability)`: -1 with errno set on failure.
int cshim_VIDIOC_QUERYCAP(int fd, struct v4l2_capability *capability);
/// `ioctl(fd, VIDIOC_ENUM_FMT, description)`.
int cshim_VIDIOC_ENUM_FMT(int fd, struct v4l2_fmtdesc *description);
/// `ioctl(fd, VIDIOC_ENUM_FRAMESIZES, size)`.
int cshim_VIDIOC_ENUM_FRAMESIZES(int fd, struct v4l2_frmsizeenum *size);
/// `ioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, interval)`.
int cshim_VIDIOC_ENUM_FRAMEINTERVALS(int fd, struct v4l2_frmivalenum *interval);

/// Names the calling thread for the kernel (`pthread_setname_np`, which glibc declares only under
/// `_GNU_SOURCE`), cut to the kernel's 15 bytes; the capture threads use it. 0 or an errno.
int cshim_name_current_thread(const char *name);
