// Package render writes the contract's values (package sbx) as the text
// that sbx's commands print: tables of sandboxes, images and processes,
// Go templates run over records (ps --format, inspect -f), resource
// reports, pull progress, and human sizes and ages.
//
// The CLI is one front-end of it; a program that shows sandboxes the way
// sbx does (its own tool, a report page) uses it instead of copying the
// CLI. It prints only to the writers it is given.
package render
