package workspace

// buildOutput is the daemon's excludes file (core.excludesFile): what a
// test run or a build leaves in the checkout and nobody means to commit.
// It ranks below the repository's own rules: a repository's .gitignore
// (or a negation in it, "!build/") decides first, and a file the
// repository tracks stays tracked; only untracked files are left out. The
// list is short on purpose: names like build/ or dist/ hold sources in
// enough repositories that they are not in it.
const buildOutput = `# written by coding-agent: build output, left out of its commits
__pycache__/
*.py[co]
.pytest_cache/
.mypy_cache/
.ruff_cache/
.tox/
.venv/
venv/
node_modules/
.gradle/
target/
.DS_Store
`
