package sandbox

import "github.com/git-sandbox/git-sandbox/internal/forecast"

// ForecastRow is one sandbox in conflicts --json (and git sandbox mcp's
// conflicts tool): its branch and its conflict forecast (nil when none
// could be made).
type ForecastRow struct {
	Branch string `json:"branch"`
	*forecast.Result
}

// ForecastRows are the forecasts of the statuses, one row per sandbox,
// never nil.
func ForecastRows(list []Status) []ForecastRow {
	rows := []ForecastRow{}
	for _, s := range list {
		rows = append(rows, ForecastRow{Branch: s.Branch, Result: s.Forecast})
	}
	return rows
}
