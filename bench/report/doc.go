// Package report prints a bench.Report: a text or Markdown table with the
// machine header, each scenario's distribution and ratios to sbx, and the
// breakdown of sbx's time; JSON; and a plot of the distributions.
package report
