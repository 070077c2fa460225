package forgetest

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"path"
	"slices"
	"strconv"
	"time"
)

// Delivery is one webhook delivery as the forge sends it: its headers and
// its JSON body. The emulators make them from their state, in the shapes
// GitHub, GitLab and Gitea document, after the change that fires them.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// Send POSTs the delivery to url, as the forge would.
func (d Delivery) Send(client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return nil, err
	}
	req.Header = d.Header.Clone()
	return client.Do(req)
}

// ID is the delivery's id: X-Gitea-Delivery, X-GitHub-Delivery, or
// GitLab's Idempotency-Key.
func (d Delivery) ID() string {
	return cmp.Or(d.Header.Get("X-Gitea-Delivery"), d.Header.Get("X-GitHub-Delivery"), d.Header.Get("Idempotency-Key"))
}

// WithSecret is d as a hook with another secret sends it: signed with it
// (GitHub, Gitea), or carrying it as the token (GitLab).
func (d Delivery) WithSecret(secret string) Delivery {
	if event := d.Header.Get("X-Gitea-Event"); event != "" {
		out := giteaDelivery(event, d.Header.Get("X-Gitea-Event-Type"), d.Body, secret)
		h := d.Header.Clone()
		for _, k := range []string{"X-Gitea-Signature", "X-Forgejo-Signature", "X-Hub-Signature-256"} {
			h.Set(k, out.Header.Get(k))
		}
		return Delivery{Header: h, Body: d.Body}
	}
	if event := d.Header.Get("X-GitHub-Event"); event != "" {
		out := githubDelivery(event, 0, d.Body, secret)
		h := d.Header.Clone()
		for _, k := range []string{"X-Hub-Signature", "X-Hub-Signature-256"} {
			h.Del(k)
			if v := out.Header.Get(k); v != "" {
				h.Set(k, v)
			}
		}
		return Delivery{Header: h, Body: d.Body}
	}
	h := d.Header.Clone()
	h.Set("X-Gitlab-Token", secret)
	return Delivery{Header: h, Body: d.Body}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// githubDelivery signs body with secret ("": unsigned) and sets GitHub's
// delivery headers.
func githubDelivery(event string, repoID int64, body []byte, secret string) Delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/5e7a9c1")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", newUUID())
	h.Set("X-GitHub-Hook-ID", "482917")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(repoID, 10))
	if secret != "" {
		m1 := hmac.New(sha1.New, []byte(secret))
		m1.Write(body)
		h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(m1.Sum(nil)))
		m256 := hmac.New(sha256.New, []byte(secret))
		m256.Write(body)
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m256.Sum(nil)))
	}
	return Delivery{Header: h, Body: body}
}

func (g *GitHub) hookURLs() ghURLs { return ghURLs{api: g.srv.URL, html: g.srv.URL} }

// LabelHook adds label to repo#number as actor would in the web UI ("" is
// the repository's owner) and returns the delivery GitHub then makes: an
// issues event (a pull_request event for a pull request) with action
// "labeled", signed with secret.
func (g *GitHub) LabelHook(repo string, number int, label, actor, secret string) Delivery {
	g.AddLabelBy(repo, number, label, actor)
	return g.labelDelivery("labeled", repo, number, label, actor, secret)
}

// UnlabelHook removes label from repo#number as the repository's owner
// would in the web UI and returns the delivery GitHub then makes, as
// LabelHook with action "unlabeled".
func (g *GitHub) UnlabelHook(repo string, number int, label, secret string) Delivery {
	g.RemoveLabelDirect(repo, number, label)
	return g.labelDelivery("unlabeled", repo, number, label, "", secret)
}

func (g *GitHub) labelDelivery(action, repo string, number int, label, actor, secret string) Delivery {
	g.st.Lock()
	defer g.st.Unlock()
	u := g.hookURLs()
	r := g.repoLocked(repo)
	it := g.mustItemLocked(repo, number)
	actor = cmp.Or(actor, r.owner)
	p := map[string]any{"action": action, "label": ghLabelJSON(u, r, g.repoLabelLocked(r, label, true)),
		"repository": g.repoJSON(u, r), "sender": g.userJSON(u, actor)}
	event := "issues"
	if it.pull != nil {
		event = "pull_request"
		p["number"] = it.number
		p["pull_request"] = g.pullJSON(u, r, it)
	} else {
		p["issue"] = g.issueJSON(u, r, it)
	}
	body, _ := json.Marshal(p)
	return githubDelivery(event, r.id, body, secret)
}

// CommentHook adds a comment by author on repo#number and returns the
// issue_comment delivery (action "created") GitHub then makes, signed
// with secret.
func (g *GitHub) CommentHook(repo string, number int, author, body, secret string) Delivery {
	id := g.AddComment(repo, number, author, body)
	g.st.Lock()
	defer g.st.Unlock()
	u := g.hookURLs()
	r := g.repoLocked(repo)
	it := g.mustItemLocked(repo, number)
	c := it.comments[slices.IndexFunc(it.comments, func(c *ghComment) bool { return c.id == id })]
	p := map[string]any{"action": "created", "issue": g.issueJSON(u, r, it), "comment": g.commentJSON(u, r, it, c),
		"repository": g.repoJSON(u, r), "sender": g.userJSON(u, author)}
	b, _ := json.Marshal(p)
	return githubDelivery("issue_comment", r.id, b, secret)
}

// gitlabDelivery sets GitLab's delivery headers, token ("": none) among
// them.
func gitlabDelivery(event string, body []byte, token string) Delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitLab/18.5.0")
	h.Set("X-Gitlab-Event", event)
	h.Set("X-Gitlab-Instance", "https://gitlab.example.com")
	h.Set("X-Gitlab-Webhook-UUID", newUUID())
	h.Set("X-Gitlab-Event-UUID", newUUID())
	h.Set("Idempotency-Key", newUUID())
	if token != "" {
		h.Set("X-Gitlab-Token", token)
	}
	return Delivery{Header: h, Body: body}
}

// hookLabel is a label as GitLab's hooks render it.
func (g *GitLab) hookLabel(p *glProject, title string) glObj {
	f := fnv.New32a()
	f.Write([]byte(p.path + "\x00" + title))
	return glObj{"id": int64(f.Sum32() % 100000), "title": title, "color": "#428bca", "project_id": p.id,
		"created_at": glHookTime(p.created), "updated_at": glHookTime(p.created), "template": false,
		"description": nil, "type": "ProjectLabel", "group_id": nil}
}

func (g *GitLab) hookLabels(p *glProject, titles []string) []glObj {
	out := make([]glObj, 0, len(titles))
	for _, t := range titles {
		out = append(out, g.hookLabel(p, t))
	}
	return out
}

// hookProject is a project as GitLab's hooks render it.
func (g *GitLab) hookProject(p *glProject) glObj {
	web := g.srv.URL + "/" + p.path
	return glObj{"id": p.id, "name": path.Base(p.path), "description": "", "web_url": web, "avatar_url": nil,
		"git_ssh_url": "git@gitlab.example.com:" + p.path + ".git", "git_http_url": web + ".git",
		"namespace": path.Base(path.Dir(p.path)), "visibility_level": 0, "path_with_namespace": p.path,
		"default_branch": "main", "ci_config_path": "", "homepage": web, "url": "git@gitlab.example.com:" + p.path + ".git",
		"ssh_url": "git@gitlab.example.com:" + p.path + ".git", "http_url": web + ".git"}
}

func (g *GitLab) hookUser(name string) glObj {
	return glObj{"id": g.userID(name), "name": name, "username": name,
		"avatar_url": "https://secure.gravatar.com/avatar/" + strconv.FormatInt(g.userID(name), 16) + "?s=80&d=identicon",
		"email":      "[REDACTED]"}
}

// glHookTime is a time as GitLab's hook payloads write it.
func glHookTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// hookItem is an issue's or merge request's object_attributes.
func (g *GitLab) hookItem(it *glItem, action string) glObj {
	o := g.itemJSON(it, false)
	o["action"] = action
	o["author_id"] = g.userID(it.author)
	o["labels"] = g.hookLabels(it.project, it.labels)
	o["url"] = o["web_url"]
	delete(o, "web_url")
	delete(o, "author")
	delete(o, "references")
	return o
}

// LabelHook adds label to the issue or merge request as user would ("" is
// the project's owner) and returns the Issue Hook (or Merge Request Hook)
// delivery GitLab then makes: action "update", with changes.labels from
// the labels before to those after; token is the hook's secret token.
func (g *GitLab) LabelHook(project, kind string, iid int, label, user, token string) Delivery {
	g.t.Helper()
	before := slices.Clone(g.Labels(project, kind, iid))
	g.AddLabelBy(project, kind, iid, label, user)
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	p := it.project
	objectKind, event := "issue", "Issue Hook"
	if kind == KindMergeRequest {
		objectKind, event = "merge_request", "Merge Request Hook"
	}
	payload := glObj{"object_kind": objectKind, "event_type": objectKind, "user": g.hookUser(cmp.Or(user, p.owner())),
		"project": g.hookProject(p), "object_attributes": g.hookItem(it, "update"),
		"labels": g.hookLabels(p, it.labels),
		"changes": glObj{
			"labels":     glObj{"previous": g.hookLabels(p, before), "current": g.hookLabels(p, it.labels)},
			"updated_at": glObj{"previous": glHookTime(it.created), "current": glHookTime(it.updated)},
		},
		"repository": glObj{"name": path.Base(p.path), "url": "git@gitlab.example.com:" + p.path + ".git",
			"description": "", "homepage": g.srv.URL + "/" + p.path}}
	b, _ := json.Marshal(payload)
	return gitlabDelivery(event, b, token)
}

// NoteHook adds a note by author on the issue or merge request and returns
// the Note Hook delivery GitLab then makes; token is the hook's secret
// token.
func (g *GitLab) NoteHook(project, kind string, iid int, author, body, token string) Delivery {
	g.t.Helper()
	g.dmu.Lock()
	defer g.dmu.Unlock()
	it := g.mustItem(project, kind, iid)
	n := g.addNote(it, author, body, false)
	p := it.project
	noteable, key := "Issue", "issue"
	if kind == KindMergeRequest {
		noteable, key = "MergeRequest", "merge_request"
	}
	item := g.hookItem(it, "")
	delete(item, "action")
	payload := glObj{"object_kind": "note", "event_type": "note", "user": g.hookUser(author), "project_id": p.id,
		"project": g.hookProject(p),
		"object_attributes": glObj{"id": n.id, "note": n.body, "noteable_type": noteable, "author_id": g.userID(author),
			"created_at": glHookTime(n.created), "updated_at": glHookTime(n.updated), "project_id": p.id,
			"attachment": nil, "line_code": nil, "commit_id": "", "noteable_id": it.id, "system": false,
			"st_diff": nil, "url": g.srv.URL + "/" + p.path + "#note_" + strconv.FormatInt(n.id, 10), "action": "create"},
		"repository": glObj{"name": path.Base(p.path), "url": "git@gitlab.example.com:" + p.path + ".git",
			"description": "", "homepage": g.srv.URL + "/" + p.path},
		key: item}
	b, _ := json.Marshal(payload)
	return gitlabDelivery("Note Hook", b, token)
}
