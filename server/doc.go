// Package server is sbx's REST front-end (sbx serve): a thin HTTP layer over
// any backend implementing sbx.Sandboxes and sbx.Images (sandbox.Host in
// sbx serve), with bearer-token auth, a proxy to each sandbox's
// executor under /v1/sandboxes/{id}/, image routes, server-sent events and
// Prometheus metrics. Its wire types are in server/api, its Go client in
// server/client, and its OpenAPI 3 document is OpenAPI (openapi.yaml).
package server
