#ifndef DELIVERYD_CLIBPQ_SHIM_H
#define DELIVERYD_CLIBPQ_SHIM_H

#include <libpq-fe.h>

/// The server's notices (`NOTICE: relation already exists, skipping`) would go to standard error;
/// the service logs what matters itself.
static void clibpq_ignore_notice(void *argument, const char *message) {
    (void)argument;
    (void)message;
}

static inline void clibpq_quiet_notices(PGconn *connection) {
    PQsetNoticeProcessor(connection, clibpq_ignore_notice, NULL);
}

/// The SQLSTATE of a failed result (`PG_DIAG_SQLSTATE` is a character macro Swift cannot import).
static inline const char *clibpq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_SQLSTATE);
}

#endif
