package main

import (
	"fmt"
	"net/http"
	"strings"
)

// model is a fake model API with known usage, for the spend tests:
// /model/SHAPE/... answers as SHAPE says.
//
//	json       Anthropic Messages JSON: claude-sonnet-4-5, 1000 in, 200 out, 100 cache write, 2000 cache read
//	sse        Anthropic Messages stream: claude-haiku-4-5, 500 in, 300 out, 1000 cache read
//	responses  OpenAI Responses stream: gpt-5, 2000 in of which 500 cached, 400 out of which 100 reasoning
//	cut        an Anthropic stream cut short after message_start (claude-sonnet-4-5, 700 in, 1 out)
//	nousage    an Anthropic-shaped JSON answer without usage
func model(w http.ResponseWriter, shape string) {
	shape, _, _ = strings.Cut(shape, "/")
	w.Header().Set("Request-Id", "req_fake_"+shape)
	if shape == "json" || shape == "nousage" {
		w.Header().Set("Content-Type", "application/json")
		if shape == "nousage" {
			fmt.Fprint(w, `{"id":"msg_2","type":"message","content":[{"type":"text","text":"no usage here"}]}`)
			return
		}
		fmt.Fprint(w, `{"id":"msg_1","type":"message","model":"claude-sonnet-4-5","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":1000,"output_tokens":200,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(s string) {
		fmt.Fprint(w, s)
		if fl != nil {
			fl.Flush()
		}
	}
	switch shape {
	case "sse":
		send("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_3\",\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":500,\"cache_read_input_tokens\":1000,\"output_tokens\":1}}}\n\n")
		for range 50 {
			send("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("z", 1000) + "\"}}\n\n")
		}
		send("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":300}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	case "responses":
		send("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\",\"usage\":null}}\n\n")
		send("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"done\"}\n\n")
		send("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\",\"usage\":{\"input_tokens\":2000,\"input_tokens_details\":{\"cached_tokens\":500},\"output_tokens\":400,\"output_tokens_details\":{\"reasoning_tokens\":100}}}}\n\n")
	case "cut":
		send("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_4\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":700,\"output_tokens\":1}}}\n\n")
		send("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"half\"}}\n\n")
		panic(http.ErrAbortHandler) // the connection (or stream) is cut
	default:
		http.Error(w, "unknown shape", http.StatusNotFound)
	}
}
