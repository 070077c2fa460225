package toolhost

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLinksRead is how many resource links of one result are read: the
// result's text is cut to MaxResultBytes anyway; this bounds the requests.
const maxLinksRead = 8

// readLinks replaces the resource links of a tool result with what the
// server gives for them (resources/read), so that the model reads the
// resource, not a name it cannot open. A link the server cannot read
// stays a link, with why; a server that offers no resources is not asked.
// The result's text, links read, is cut to MaxResultBytes as any other.
func (s *server) readLinks(ctx context.Context, sess *mcp.ClientSession, res *mcp.CallToolResult) {
	init := sess.InitializeResult()
	canRead := init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil
	read := 0
	out := make([]mcp.Content, 0, len(res.Content))
	for _, c := range res.Content {
		link, ok := c.(*mcp.ResourceLink)
		if !ok {
			out = append(out, c)
			continue
		}
		if !canRead || read == maxLinksRead {
			why := "the server offers no resources to read"
			if canRead {
				why = fmt.Sprintf("only the first %d links of a result are read", maxLinksRead)
			}
			out = append(out, &mcp.TextContent{Text: fmt.Sprintf("[resource link %s: %s; not read: %s]", link.URI, orUnknown(link.Name), why)})
			continue
		}
		read++
		got, err := sess.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
		if err != nil {
			s.log.Debug("reading a resource a tool linked to", "server", s.cfg.Name, "uri", link.URI, "error", err)
			out = append(out, &mcp.TextContent{Text: fmt.Sprintf("[resource link %s: %s; reading it failed: %v]", link.URI, orUnknown(link.Name), err)})
			continue
		}
		if len(got.Contents) == 0 {
			out = append(out, &mcp.TextContent{Text: fmt.Sprintf("[resource %s: empty]", link.URI)})
		}
		for _, rc := range got.Contents {
			out = append(out, &mcp.EmbeddedResource{Resource: rc})
		}
	}
	res.Content = out
}
