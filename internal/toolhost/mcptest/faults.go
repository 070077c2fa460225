package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addSchema is the input schema of add: two integers, nothing else.
const addSchema = `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
	"required": ["a", "b"], "additionalProperties": false}`

// addFaultTools adds the tools that misbehave as real servers do: add
// (with Exit), hang (with Hang) and print (with Print).
func addFaultTools(s *mcp.Server, opts ServerOptions) {
	if opts.Exit != nil {
		// A raw handler: the SDK does not check the arguments against the
		// schema, and the tool trusts them, as many servers do.
		s.AddTool(&mcp.Tool{Name: "add", Annotations: readOnly, InputSchema: json.RawMessage(addSchema),
			Description: "Adds the integers a and b. It trusts its input schema: any other argument crashes the server."},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in map[string]any
				_ = json.Unmarshal(req.Params.Arguments, &in)
				a, okA := in["a"].(float64)
				b, okB := in["b"].(float64)
				if !okA || !okB || len(in) != 2 {
					opts.Exit(4) // what an unchecked type assertion does to a server
					return nil, fmt.Errorf("add: the arguments %s are not two numbers", req.Params.Arguments)
				}
				return text(strconv.FormatFloat(a+b, 'f', -1, 64)), nil
			})
	}
	if opts.Hang != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Makes the whole server stop answering, this call and every later one."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				opts.Hang()
				return text("unreachable"), nil, nil
			})
	}
	if opts.Print != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "print", Description: "Writes its text as a line on stdout, outside the protocol, then returns it."},
			func(_ context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
				opts.Print(in.Text)
				return text(in.Text), nil, nil
			})
	}
}
