// Package inspect terminates the TLS of a sandbox's connections to its
// inspected hosts (those with L7 rules or secrets) with the sandbox's own
// CA, checks every request (Host against the server name, then the L7
// rules), swaps secret placeholders for their values on requests to the
// hosts they are bound to, scrubs the values back out of responses, and
// forwards the requests to the real host over verified TLS. It records
// one audit event per request and never a secret's value.
package inspect
