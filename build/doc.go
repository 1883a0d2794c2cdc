// Package build builds images from Dockerfiles with sbx itself: BuildKit's
// Dockerfile frontend packages parse the file, and every step runs over an
// Engine (the local host): each RUN in a throw-away build sandbox whose
// writable layer becomes the step's layer, each COPY, ADD and WORKDIR
// written into a build sandbox through its executor, metadata steps
// changing the config alone. Each step's result is kept as an image named
// after a chain of keys (the previous key, the instruction as expanded,
// and for COPY and ADD the content of the files, not their times), so an
// unchanged build does no work and a changed line rebuilds from there on.
package build
