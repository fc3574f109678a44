#define _GNU_SOURCE
#include "CFFmpegDeviceShims.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>

int cshim_device_AVERROR_EOF(void) { return AVERROR_EOF; }
int cshim_device_AVERROR_EAGAIN(void) { return AVERROR(EAGAIN); }
int cshim_device_AV_PIX_FMT_YUV420P(void) { return AV_PIX_FMT_YUV420P; }

/// Retries a request interrupted by a signal, as V4L2's own tools do.
static int request(int fd, unsigned long number, void *argument) {
    int rc;
    do {
        rc = ioctl(fd, number, argument);
    } while (rc == -1 && errno == EINTR);
    return rc;
}

int cshim_VIDIOC_QUERYCAP(int fd, struct v4l2_capability *capability) {
    return request(fd, VIDIOC_QUERYCAP, capability);
}

int cshim_VIDIOC_ENUM_FMT(int fd, struct v4l2_fmtdesc *description) {
    return request(fd, VIDIOC_ENUM_FMT, description);
}

int cshim_VIDIOC_ENUM_FRAMESIZES(int fd, struct v4l2_frmsizeenum *size) {
    return request(fd, VIDIOC_ENUM_FRAMESIZES, size);
}

int cshim_VIDIOC_ENUM_FRAMEINTERVALS(int fd, struct v4l2_frmivalenum *interval) {
    return request(fd, VIDIOC_ENUM_FRAMEINTERVALS, interval);
}

int cshim_name_current_thread(const char *name) {
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = 0;
    return pthread_setname_np(pthread_self(), cut);
}
