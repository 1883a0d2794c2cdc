// Package isolate builds libcontainer configurations from a Spec and runs processes with them.
package isolate
