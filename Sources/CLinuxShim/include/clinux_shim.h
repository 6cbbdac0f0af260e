#ifndef DELIVERYD_CLINUX_SHIM_H
#define DELIVERYD_CLINUX_SHIM_H

// Linux calls that Swift's Glibc module does not export: epoll, eventfd, accept4 and a thread's niceness.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

/// accept4 needs _GNU_SOURCE, which this file must not force on every includer; see shim.c.
int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// Sets the calling thread's niceness (Linux schedules threads apart; `setpriority` with the
/// thread's id), 0 to 19 without privileges. Returns 0, or -1 with `errno` set.
int clinux_set_thread_niceness(int niceness);

#endif
