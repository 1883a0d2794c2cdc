// Package tlsca is the certificate authority of one sandbox whose egress
// is inspected: an ECDSA P-256 CA, name-constrained to the hosts the
// proxy decrypts, that mints a leaf certificate per server name. Its
// private key stays on the host side (memory and a 0600 file); only the
// certificate is given to the sandbox.
package tlsca
