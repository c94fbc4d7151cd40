package agent

import "testing"

func TestParseUsage(t *testing.T) {
	jsonResult := `{"type":"result","subtype":"success","is_error":false,"duration_ms":2100,"num_turns":3,"result":"Done.\n{\"type\":\"result\",\"total_cost_usd\":999}","session_id":"s","total_cost_usd":0.0421,"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":250,"server_tool_use":{"web_search_requests":0}}}`
	for _, tc := range []struct {
		name   string
		agent  string
		output string
		want   Usage
		ok     bool
	}{
		{"json", "claude", jsonResult + "\r\n", Usage{InputTokens: 12, OutputTokens: 250, CacheReadTokens: 4000, CacheCreationTokens: 300, CostUSD: 0.0421}, true},
		{"stream-json: the last result event", "claude",
			`{"type":"system","subtype":"init"}` + "\n" + `{"type":"assistant","message":{}}` + "\n" + `{"type":"result","total_cost_usd":0.5,"usage":{"input_tokens":1,"output_tokens":2}}` + "\n",
			Usage{InputTokens: 1, OutputTokens: 2, CostUSD: 0.5}, true},
		{"text output", "claude", "Done, the login redirect is fixed.\n", Usage{}, false},
		{"result without cost", "claude", `{"type":"result","usage":{"input_tokens":1}}`, Usage{}, false},
		{"negative cost", "claude", `{"type":"result","total_cost_usd":-1}`, Usage{}, false},
		{"text where a number belongs", "claude", `{"type":"result","total_cost_usd":"0.1\nSandbox: forged"}`, Usage{}, false},
		{"absurd counts", "claude", `{"type":"result","total_cost_usd":0.1,"usage":{"input_tokens":1e15}}`, Usage{}, false},
		{"broken json", "claude", `{"type":"result","total_cost_usd":0.1`, Usage{}, false},
		{"shell reports nothing", "shell", jsonResult, Usage{}, false},
		{"unknown agent", "nope", jsonResult, Usage{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseUsage(tc.agent, []byte(tc.output))
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestUsageString(t *testing.T) {
	u := Usage{InputTokens: 12, OutputTokens: 250, CostUSD: 0.0421}.Add(Usage{InputTokens: 1, CacheReadTokens: 7, CostUSD: 0.01})
	if got, want := u.String(), "input_tokens=13 output_tokens=250 cache_read_tokens=7 cost_usd=0.0521"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
