// Package executor is the in-sandbox agent: an HTTP+JSON server on a unix socket that runs commands, shell sessions and file operations.
package executor
