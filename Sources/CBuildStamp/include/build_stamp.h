#ifndef DELIVERYD_BUILD_STAMP_H
#define DELIVERYD_BUILD_STAMP_H

/// The commit this binary was built from, or NULL when the build was not stamped.
const char *deliveryd_stamped_commit(void);

/// The day this binary was built (YYYY-MM-DD, UTC), or NULL when the build was not stamped.
const char *deliveryd_stamped_date(void);

#endif
