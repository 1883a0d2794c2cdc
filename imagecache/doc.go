// Package imagecache pulls and imports OCI images into a content-addressed layer store and unpacks hostile layers safely.
package imagecache
