package experiment

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// maxReportedFailures bounds the failed samples the text report lists.
const maxReportedFailures = 10

// WriteReport prints res as text: the experiment, a table of the arms'
// figures, the test with its p-value and the verdict, then the samples
// that failed or could not be run (the first few).
func WriteReport(w io.Writer, f *File, res *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Experiment %s: %s\n", f.ID, f.Name)
	if f.Hypothesis != "" {
		fmt.Fprintf(&b, "Hypothesis: %s\n", f.Hypothesis)
	}
	fmt.Fprintf(&b, "Run %s: %d samples (%d task(s) × %d per variant × %d variants) in %s\n\n", res.ID, len(res.Samples),
		len(f.Tasks), f.Samples, len(f.Variants), (time.Duration(res.CompletedAt-res.StartedAt) * time.Millisecond).Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIANT\tPROVIDER\tSAMPLES\tPASSED\tPASS RATE\tMEAN DURATION\tMEAN TOKENS\tLIFT")
	for i, v := range res.Variants {
		prov := v.Provider
		if v.Model != "" {
			prov += " " + v.Model
		}
		if v.Skill != "" {
			prov += fmt.Sprintf(" +%s v%d", v.Skill, v.SkillVersion)
		}
		rate, dur, tok, lift := "-", "-", "-", "-"
		if v.Samples > 0 {
			rate = percent(v.PassRate)
			dur = (time.Duration(v.MeanDurationMs * float64(time.Millisecond))).Round(time.Millisecond).String()
			tok = fmt.Sprintf("%.0f", v.MeanTokens)
		}
		switch {
		case i == 0:
			lift = "(control)"
		case v.Lift != nil:
			lift = fmt.Sprintf("%+.1f%%", *v.Lift*100)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", v.Variant, prov, v.Samples, v.Passed, rate, dur, tok, lift)
	}
	tw.Flush()
	b.WriteString("\n")
	if len(res.Compared) == 2 {
		fmt.Fprintf(&b, "Test: %s, %s against %s (the highest pass rate against the next)\n", res.Test, res.Compared[0], res.Compared[1])
	} else {
		fmt.Fprintf(&b, "Test: %s\n", res.Test)
	}
	switch {
	case res.Winner != "":
		fmt.Fprintf(&b, "Winner: %s (p = %s): %s\n", res.Winner, FormatP(*res.PValue), res.Reason)
	case res.PValue != nil:
		fmt.Fprintf(&b, "No winner: the data cannot tell (p = %s): %s\n", FormatP(*res.PValue), res.Reason)
	default:
		fmt.Fprintf(&b, "No winner: the data cannot tell: %s\n", res.Reason)
	}
	var failed, setup []Sample
	for _, s := range res.Samples {
		switch {
		case s.SetupError:
			setup = append(setup, s)
		case !s.Pass && !s.Interrupted:
			failed = append(failed, s)
		}
	}
	listSamples(&b, fmt.Sprintf("%d sample(s) could not be run and are not counted:", len(setup)), setup)
	listSamples(&b, fmt.Sprintf("%d sample(s) failed:", len(failed)), failed)
	if res.Worktrees != "" {
		fmt.Fprintf(&b, "\nWorktrees kept in %s\n", res.Worktrees)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func listSamples(b *strings.Builder, title string, samples []Sample) {
	if len(samples) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s\n", title)
	for i, s := range samples {
		if i == maxReportedFailures {
			fmt.Fprintf(b, "  … and %d more (--json lists them all)\n", len(samples)-i)
			break
		}
		fmt.Fprintf(b, "  %s\n", SampleLine(s))
	}
}

// SampleLine describes one sample in a line: "s4 flaky task 1 sample 2:
// fail (12ms): check failed: exit status 1".
func SampleLine(s Sample) string {
	verdict := "pass"
	switch {
	case s.SetupError:
		verdict = "not run"
	case s.Interrupted:
		verdict = "interrupted"
	case !s.Pass:
		verdict = "fail"
	}
	line := fmt.Sprintf("%s %s task %d sample %d: %s (%s)", s.Worker, s.Variant, s.Task, s.Sample, verdict,
		(time.Duration(s.DurationMs) * time.Millisecond).String())
	if s.Error != "" {
		line += ": " + s.Error
	}
	return line
}
