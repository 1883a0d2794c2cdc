// Package tests holds integration and end-to-end tests that need root and a
// real kernel, and the fixture builders they share.
package tests
