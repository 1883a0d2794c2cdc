// Package needcgo stops a build of sbx's local backend without cgo with
// an error that says so: package isolate imports it, and without cgo its
// one other file names an undefined identifier that reads as the message,
// printed beside runc's own undefined symbols. A remote-only program
// (server/client, the contract) does not import it and builds with
// CGO_ENABLED=0.
package needcgo
