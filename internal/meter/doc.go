// Package meter measures what a sandbox spends on model APIs, where it can
// be known for certain: in the credential broker, which terminates TLS for
// the hosts a secret is bound to. It reads the usage a model API reports in
// its responses (Anthropic's Messages API, OpenAI's Responses and Chat
// Completions; JSON bodies and server-sent-event streams) as the bytes pass
// on to the agent, without holding them back, and appends one JSON line per
// request to the sandbox's usage log. It prices the tokens (a built-in table
// the user's [[price]] tables override), keeps the sandbox's budget (the
// proxy answers model requests past it with the API's own 429 error), and
// totals the logs for ps, usage and land.
//
// Everything in a response is the upstream's word, parsed as numbers and
// short names only. A response the parsers do not understand, or one cut
// short, is a request with unknown usage, never an error of the proxy.
package meter
