package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/safe"
)

// Templates (git-branch from an Application's annotations, the commit
// message from the operator) run with limits, so that no template can hold
// the repository lock or fill memory:
//   - range only over fields of the data (the images or changes of one
//     write), nested at most maxRangeDepth deep, never over a number or a
//     computed value;
//   - no {{define}}, {{block}} or {{template}}: calls of templates nest
//     into an amount of work no output or range limit sees (a few lines
//     make 2^62 calls that write nothing), and text/template cannot be
//     stopped once it runs;
//   - printf with widths and precisions of at most maxFormatWidth;
//   - at most maxTemplateOutput bytes of output and templateTimeout of
//     time.
const (
	maxRangeDepth     = 3
	maxFormatWidth    = 256
	maxTemplateOutput = 64 << 10
	templateTimeout   = 2 * time.Second
)

// errTemplateLimit is wrapped by errors of templates that break a limit.
var errTemplateLimit = errors.New("template exceeds the limits of write-back templates")

// parseLimitedTemplate parses text and checks the limits that can be seen
// before running it.
func parseLimitedTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{"printf": limitedPrintf}).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("%w: {{define}} and {{block}} are not allowed", errTemplateLimit)
	}
	if t.Tree != nil {
		if err := checkRanges(t.Root, 0); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkRanges refuses range over anything but a field of the data, and
// ranges nested deeper than maxRangeDepth.
func checkRanges(n parse.Node, depth int) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkRanges(c, depth); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		if depth+1 > maxRangeDepth {
			return fmt.Errorf("%w: range nested more than %d deep", errTemplateLimit, maxRangeDepth)
		}
		if !rangesOverField(n.Pipe) {
			return fmt.Errorf("%w: range over %s: only fields of the data (such as .Images) can be ranged over", errTemplateLimit, n.Pipe)
		}
		if err := checkRanges(n.List, depth+1); err != nil {
			return err
		}
		return checkRanges(n.ElseList, depth)
	case *parse.IfNode:
		if err := checkRanges(n.List, depth); err != nil {
			return err
		}
		return checkRanges(n.ElseList, depth)
	case *parse.WithNode:
		if err := checkRanges(n.List, depth); err != nil {
			return err
		}
		return checkRanges(n.ElseList, depth)
	case *parse.TemplateNode:
		return fmt.Errorf("%w: {{template %q}} is not allowed", errTemplateLimit, n.Name)
	}
	return nil
}

// rangesOverField reports whether a range pipeline is a lone field chain:
// .Images, $.Images or $x.Field.
func rangesOverField(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1
	}
	return false
}

// limitedPrintf is fmt.Sprintf that refuses widths and precisions over
// maxFormatWidth and '*' (a width taken from an argument).
func limitedPrintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
	spec: // flags, width and precision, up to the verb
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return "", fmt.Errorf("%w: printf width or precision from an argument", errTemplateLimit)
			case c >= '0' && c <= '9':
				j := i
				for j < len(format) && format[j] >= '0' && format[j] <= '9' {
					j++
				}
				if n, err := strconv.Atoi(format[i:j]); err != nil || n > maxFormatWidth {
					return "", fmt.Errorf("%w: printf width or precision %s over %d", errTemplateLimit, format[i:j], maxFormatWidth)
				}
				i = j - 1
			case c == '+' || c == '-' || c == ' ' || c == '#' || c == '.' || c == '[' || c == ']':
			default:
				break spec
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// limitedWriter fails once more than max bytes were written.
type limitedWriter struct {
	buf bytes.Buffer
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, fmt.Errorf("%w: output over %d bytes", errTemplateLimit, w.max)
	}
	return w.buf.Write(p)
}

// renderLimited executes t with data within maxTemplateOutput and
// templateTimeout.
func renderLimited(t *template.Template, data any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), templateTimeout)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		w := &limitedWriter{max: maxTemplateOutput}
		err := safe.Call(func() error { return t.Execute(w, data) })
		done <- result{w.buf.String(), err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("%w: still running after %s", errTemplateLimit, templateTimeout)
	}
}
