package forgetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ghApp is a GitHub App installed on the emulator: its public key checks
// the JWTs it signs, and the installation tokens it was given act as its
// bot user.
type ghApp struct {
	id       int64
	slug     string
	key      *rsa.PublicKey
	installs map[string]int64       // account login → installation id
	next     int64                  // the id of the next installation
	tokens   map[string]ghInstToken // live installation tokens
	issued   int                    // installation tokens issued, revoked ones included
	ttl      time.Duration
	jwts     int // JWT-authenticated requests served
}

// ghInstToken is an installation token the emulator issued and has not
// revoked.
type ghInstToken struct {
	installation int64
	expires      time.Time
}

// InstallApp registers a GitHub App (id, slug) and installs it on the
// accounts (users or organisations owning repositories), one installation
// each, numbered from 1000 in order. From then on the app's bot user
// ("slug[bot]") is BotLogin: the acting user of installation tokens. It
// returns the app's private key, PEM-encoded (PKCS#1, as GitHub hands it
// out). Installation tokens live an hour unless SetInstallationTokenTTL.
func (g *GitHub) InstallApp(id int64, slug string, accounts ...string) []byte {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(fmt.Sprintf("generating an app key: %v", err))
	}
	g.st.Lock()
	defer g.st.Unlock()
	app := &ghApp{id: id, slug: slug, key: &key.PublicKey, installs: map[string]int64{}, next: 1000,
		tokens: map[string]ghInstToken{}, ttl: time.Hour}
	for _, a := range accounts {
		app.installs[strings.ToLower(a)] = app.next
		app.next++
	}
	g.app = app
	g.BotLogin = slug + "[bot]"
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// SetInstallationTokenTTL sets how long the installation tokens issued
// from now on live.
func (g *GitHub) SetInstallationTokenTTL(d time.Duration) {
	g.st.Lock()
	defer g.st.Unlock()
	g.app.ttl = d
}

// InstallationTokens is how many installation tokens were issued, revoked
// ones included.
func (g *GitHub) InstallationTokens() int {
	g.st.Lock()
	defer g.st.Unlock()
	if g.app == nil {
		return 0
	}
	return g.app.issued
}

// RevokeInstallationTokens revokes every installation token issued so far,
// as GitHub does when one is revoked (DELETE /installation/token) or
// reported leaked: they are answered 401 "Bad credentials" from now on,
// although their expiry is ahead. The app stays installed: a new token is
// granted.
func (g *GitHub) RevokeInstallationTokens() {
	g.st.Lock()
	defer g.st.Unlock()
	clear(g.app.tokens)
}

// RevokeToken revokes the personal access token (Token), as its owner
// does on GitHub or GitHub does when it is reported leaked: it is answered
// 401 "Bad credentials" from now on, on the API and by git.
func (g *GitHub) RevokeToken() {
	g.st.Lock()
	defer g.st.Unlock()
	g.tokenRevoked = true
}

// Uninstall removes the app's installation on account, as its owner does
// on GitHub: the installation's tokens are answered 401, and the
// installation is not found any more (404), nor a token for it granted.
func (g *GitHub) Uninstall(account string) {
	g.st.Lock()
	defer g.st.Unlock()
	id, ok := g.app.installs[strings.ToLower(account)]
	if !ok {
		return
	}
	delete(g.app.installs, strings.ToLower(account))
	maps.DeleteFunc(g.app.tokens, func(_ string, t ghInstToken) bool { return t.installation == id })
}

// Install installs the app on account (again, after Uninstall) and returns
// the installation's id: a new one, as GitHub gives a new installation.
func (g *GitHub) Install(account string) int64 {
	g.st.Lock()
	defer g.st.Unlock()
	id := g.app.next
	g.app.next++
	g.app.installs[strings.ToLower(account)] = id
	return id
}

// accepts reports whether tok is the emulator's token or a live
// installation token of its app.
func (g *GitHub) accepts(tok string) bool {
	g.st.Lock()
	defer g.st.Unlock()
	return g.acceptsLocked(tok)
}

func (g *GitHub) acceptsLocked(tok string) bool {
	if tok == "" {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(g.Token)) == 1 {
		return !g.tokenRevoked
	}
	return g.installationTokenLocked(tok)
}

func (g *GitHub) installationTokenLocked(tok string) bool {
	if g.app == nil {
		return false
	}
	t, ok := g.app.tokens[tok]
	return ok && g.nowLocked().Before(t.expires)
}

// appPath reports whether path is one a JWT authenticates: the app's own
// endpoints and the installation lookups.
func appPath(path string) bool {
	path = strings.TrimPrefix(path, "/api/v3")
	return path == "/app" || strings.HasPrefix(path, "/app/") || strings.HasSuffix(path, "/installation")
}

// checkJWT verifies a request's app JWT as GitHub does: RS256, signed by
// the app's key, iss the app's id, issued at most 60 s ahead of the
// clock, expiring within 10 minutes of its issue and not yet expired.
// It returns the message of GitHub's 401 when it fails.
func (g *GitHub) checkJWT(r *http.Request) (string, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "A JSON web token could not be decoded", false
	}
	g.st.Lock()
	app, now := g.app, g.nowLocked()
	g.st.Unlock()
	if app == nil {
		return "Integration not found", false
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return app.key, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithIssuedAt(), jwt.WithLeeway(60*time.Second), jwt.WithExpirationRequired())
	if err != nil {
		return "A JSON web token could not be decoded", false
	}
	if claims.Issuer != strconv.FormatInt(app.id, 10) {
		return "Integration not found", false
	}
	if claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute {
		return "Expiration time' claim ('exp') is too far in the future", false
	}
	g.st.Lock()
	app.jwts++
	g.st.Unlock()
	return "", true
}

// getApp answers GET /app: the authenticated app.
func (g *GitHub) getApp(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	app := g.app
	g.reply(w, r, http.StatusOK, map[string]any{"id": app.id, "slug": app.slug, "name": app.slug,
		"node_id": "A_kw" + strconv.FormatInt(app.id, 10), "owner": map[string]any{"login": "acme", "type": "Organization"},
		"html_url": "https://github.com/apps/" + app.slug, "permissions": ghAppPermissions,
		"events": []string{"issues", "issue_comment", "pull_request"}})
}

var ghAppPermissions = map[string]string{"issues": "write", "pull_requests": "write", "contents": "write", "metadata": "read"}

// getRepoInstallation answers GET /repos/{owner}/{repo}/installation.
func (g *GitHub) getRepoInstallation(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	_, repo := g.repos[r.PathValue("owner")+"/"+r.PathValue("repo")]
	g.st.Unlock()
	if !repo {
		g.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	g.getAccountInstallation(w, r)
}

// getAccountInstallation answers GET /orgs/{owner}/installation and GET
// /users/{owner}/installation: the emulator does not tell organisations
// from users, so either answers for an account the app is installed on.
func (g *GitHub) getAccountInstallation(w http.ResponseWriter, r *http.Request) {
	owner := r.PathValue("owner")
	g.st.Lock()
	app := g.app
	id, ok := app.installs[strings.ToLower(owner)]
	if !ok {
		g.st.Unlock()
		g.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	defer g.st.Unlock()
	g.reply(w, r, http.StatusOK, map[string]any{"id": id, "app_id": app.id, "app_slug": app.slug,
		"target_type": "Organization", "account": map[string]any{"login": owner}, "permissions": ghAppPermissions,
		"repository_selection": "all"})
}

// createInstallationToken answers POST /app/installations/{id}/access_tokens.
func (g *GitHub) createInstallationToken(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.st.Lock()
	app := g.app
	known := false
	for _, v := range app.installs {
		known = known || v == id
	}
	if err != nil || !known {
		g.st.Unlock()
		g.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	var raw [20]byte
	_, _ = rand.Read(raw[:])
	tok := "ghs_" + hex.EncodeToString(raw[:])
	exp := g.nowLocked().Add(app.ttl).UTC().Truncate(time.Second)
	app.tokens[tok] = ghInstToken{installation: id, expires: exp}
	app.issued++
	defer g.st.Unlock()
	g.reply(w, r, http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.Format(time.RFC3339),
		"permissions": ghAppPermissions, "repository_selection": "all"})
}
