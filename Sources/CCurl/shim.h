#ifndef DELIVERYD_CCURL_SHIM_H
#define DELIVERYD_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic, which Swift cannot call.
// Each wrapper below fixes the type of the one argument, as libcurl's documentation requires per option.

/// Sets an option whose value is a `long`.
static inline CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// Sets an option whose value is a pointer (strings, lists, user data).
static inline CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// Sets an option whose value is a `curl_off_t` (large sizes).
static inline CURLcode ccurl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// Sets the body write callback, whose C type Swift cannot pass through a variadic argument.
static inline CURLcode ccurl_easy_setopt_write_function(CURL *handle, curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

/// Sets the response header callback.
static inline CURLcode ccurl_easy_setopt_header_function(CURL *handle, curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

/// Sets the callback that opens each connection's socket: webhooks check there the address about to
/// be connected to, whatever name resolved to it.
static inline CURLcode ccurl_easy_setopt_opensocket_function(CURL *handle, curl_opensocket_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
}

/// Reads a `long` piece of information (response code, HTTP version).
static inline CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// Reads a `double` piece of information (timings).
static inline CURLcode ccurl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// Reads a pointer piece of information (private data, effective URL).
static inline CURLcode ccurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

/// Sets a multi-handle option whose value is a `long`.
static inline CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/// Sets a multi-handle option whose value is a pointer (callback user data).
static inline CURLMcode ccurl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

/// Sets the callback through which libcurl says which sockets to watch (`curl_multi_socket_action`).
static inline CURLMcode ccurl_multi_setopt_socket_function(CURLM *multi, curl_socket_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
}

/// Sets the callback through which libcurl asks to be called back after a timeout.
static inline CURLMcode ccurl_multi_setopt_timer_function(CURLM *multi, curl_multi_timer_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
}

/// CURLVERSION_NOW is an alias macro Swift does not import.
static inline curl_version_info_data *ccurl_version_info_now(void) {
    return curl_version_info(CURLVERSION_NOW);
}

#endif
