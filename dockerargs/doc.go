// Package dockerargs reads the command-line forms docker users type into
// the contract's values (package sbx): signal names and numbers, stop
// timeouts in seconds, ID:PATH copy arguments, KEY=VALUE labels and
// environment entries, --filter terms, PORT[/PROTO] queries, and an image
// or a path as the first argument of run, with the command docker runs
// for an image. Register adds the flags of docker run, create, exec and
// ps, under docker's names, to a pflag.FlagSet.
//
// sbx's CLI is one user of it; a front-end that takes docker's words (a
// chat bot, a CI runner's job file) uses it to read them the same way.
package dockerargs
