#define _GNU_SOURCE
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "clinux_shim.h"

int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    return accept4(fd, address, length, flags);
}

int clinux_set_thread_niceness(int niceness) {
    // On Linux a thread id names one thread to setpriority: the niceness is the calling thread's alone.
    return setpriority(PRIO_PROCESS, (id_t)gettid(), niceness);
}
