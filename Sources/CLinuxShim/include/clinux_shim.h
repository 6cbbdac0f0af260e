#ifndef DELIVERYD_CLINUX_SHIM_H
#define DELIVERYD_CLINUX_SHIM_H

// Linux calls that Swift's Glibc module does not export: epoll, eventfd and accept4.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

/// accept4 needs _GNU_SOURCE, which this file must not force on every includer; see shim.c.
int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

#endif
