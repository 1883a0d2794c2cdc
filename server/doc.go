// Package server is the REST front-end over sandbox.Manager.
package server
