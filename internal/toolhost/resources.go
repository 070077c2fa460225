package toolhost

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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

// ResourceServer is the host's own server name for the tools that find
// and read the resources the servers list (resources/find,
// resources/read): no configured server may take it.
const ResourceServer = "resources"

// maxListed is the most resources a server's listing is read of.
const maxListed = 1000

// findMatches is the most resources one search answers with.
const findMatches = 10

// resource is one resource a process-scoped server listed.
type resource struct {
	server                       *server
	uri, name, description, mime string
}

// listResources reads the resources a freshly started process-scoped
// server lists, when it offers any (a task's instance serves its task
// alone and is not listed). A listing that fails is logged: the server's
// tools work without it.
func (s *server) listResources(ctx context.Context, sess *mcp.ClientSession) {
	init := sess.InitializeResult()
	if s.task != "" || s.cfg.Scope == ScopeTask || init == nil || init.Capabilities == nil || init.Capabilities.Resources == nil {
		return
	}
	var out []resource
	for r, err := range sess.Resources(ctx, nil) {
		if err != nil {
			s.log.Warn("listing the MCP server's resources failed; they cannot be searched", "server", s.cfg.Name, "error", err)
			return
		}
		out = append(out, resource{server: s, uri: r.URI, name: r.Name, description: r.Description, mime: r.MIMEType})
		if len(out) == maxListed {
			s.log.Warn("the MCP server lists more resources than are kept for search", "server", s.cfg.Name, "kept", maxListed)
			break
		}
	}
	s.resources = out
}

// resourceTools are the host's tools over the servers' resources.
func resourceTools(count int) []Tool {
	return []Tool{
		{Server: ResourceServer, Name: "find", ReadOnly: true,
			Description: fmt.Sprintf("Searches the %d resources (documents, files, records) the MCP servers offer by words of their names, URIs and descriptions; answers with the best matches' URIs.", count),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words that describe the resource"}},"required":["query"]}`)},
		{Server: ResourceServer, Name: "read", ReadOnly: true,
			Description: "Reads a resource by its URI (as resources/find or a tool result names it) from the server that offers it.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"uri":{"type":"string"}},"required":["uri"]}`)},
	}
}

// callResources answers a call of the host's resource tools.
func (h *Host) callResources(ctx context.Context, tool string, args map[string]any) Result {
	switch tool {
	case "find":
		q, _ := args["query"].(string)
		return h.findResources(q)
	case "read":
		uri, _ := args["uri"].(string)
		return h.readResource(ctx, uri)
	}
	return h.toolError(fmt.Sprintf("Unknown tool %q on %q. Its tools are: find, read.", tool, ResourceServer))
}

// findResources ranks the resources by how many of the query's words
// their URI, name and description hold.
func (h *Host) findResources(query string) Result {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return h.toolError(`resources/find takes {"query": "words describing the resource"}`)
	}
	type hit struct {
		r     resource
		score int
	}
	var hits []hit
	for _, r := range h.resources {
		text := strings.ToLower(r.uri + " " + r.name + " " + r.description)
		score := 0
		for _, w := range words {
			if strings.Contains(text, w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{r, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	if len(hits) == 0 {
		return h.result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("No resource matches %q.", query)}}}, false)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d resources match; read one with resources/read {\"uri\": ...}:\n", len(hits))
	for _, x := range hits[:min(len(hits), findMatches)] {
		fmt.Fprintf(&b, "- %s (%s, on %s)", x.r.uri, orUnknown(x.r.name), x.r.server.cfg.Name)
		if x.r.description != "" {
			fmt.Fprintf(&b, ": %s", x.r.description)
		}
		b.WriteString("\n")
	}
	return h.result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, false)
}

// readResource reads uri from the server that listed it.
func (h *Host) readResource(ctx context.Context, uri string) Result {
	i := slices.IndexFunc(h.resources, func(r resource) bool { return r.uri == uri })
	if i < 0 {
		return h.toolError(fmt.Sprintf("No server lists the resource %q: find it with resources/find first.", uri))
	}
	s := h.resources[i].server
	link := &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: uri, Name: h.resources[i].name}}}
	c, err := s.current(ctx)
	if err != nil {
		return h.toolError(fmt.Sprintf("MCP server %q, which offers %s, is not running: %v.", s.cfg.Name, uri, err))
	}
	callCtx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	s.readLinks(callCtx, c.sess, link)
	return h.result(link, false)
}
