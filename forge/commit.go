package forge

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/image-updater/argocd-image-updater/settings"
)

// Committer creates commits through a service's API rather than by a
// push, so that the service signs them (GitHub marks commits made with a
// GitHub App's installation token as verified).
type Committer interface {
	// CreateBranch creates branch at commit sha.
	CreateBranch(ctx context.Context, branch, sha string) error
	// Commit creates one commit on branch that writes files (their whole
	// content) on top of expectedHead, and returns its hash. When the
	// branch no longer points to expectedHead, nothing is committed (the
	// caller reads the branch again to tell).
	Commit(ctx context.Context, branch, expectedHead, message string, files map[string][]byte) (string, error)
}

// CreateBranch is POST /repos/{owner}/{repo}/git/refs
// (https://docs.github.com/rest/git/refs#create-a-reference).
func (g *gitHub) CreateBranch(ctx context.Context, branch, sha string) error {
	return g.call(ctx, http.MethodPost, "/repos/"+g.project+"/git/refs", map[string]string{"ref": "refs/heads/" + branch, "sha": sha}, nil)
}

// createCommitOnBranch is GitHub's GraphQL mutation that commits file
// changes to a branch, guarded by the branch's expected head
// (https://docs.github.com/graphql/reference/mutations#createcommitonbranch).
const createCommitOnBranch = `mutation($input: CreateCommitOnBranchInput!) { createCommitOnBranch(input: $input) { commit { oid } } }`

// Commit is the createCommitOnBranch mutation, at the GraphQL endpoint
// that goes with the REST API's base URL: https://api.github.com/graphql,
// or https://HOST/api/graphql for GitHub Enterprise Server's
// https://HOST/api/v3.
func (g *gitHub) Commit(ctx context.Context, branch, expectedHead, message string, files map[string][]byte) (string, error) {
	type addition struct {
		Path     string `json:"path"`
		Contents string `json:"contents"`
	}
	headline, body, _ := strings.Cut(strings.TrimSpace(message), "\n")
	input := map[string]any{
		"branch":          map[string]string{"repositoryNameWithOwner": g.project, "branchName": branch},
		"expectedHeadOid": expectedHead,
		"message":         map[string]string{"headline": strings.TrimSpace(headline), "body": strings.TrimSpace(body)},
	}
	var additions []addition
	for _, p := range slices.Sorted(maps.Keys(files)) {
		additions = append(additions, addition{Path: p, Contents: base64.StdEncoding.EncodeToString(files[p])})
	}
	input["fileChanges"] = map[string]any{"additions": additions}
	var answer struct {
		Data struct {
			CreateCommitOnBranch struct {
				Commit struct {
					OID string `json:"oid"`
				} `json:"commit"`
			} `json:"createCommitOnBranch"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	endpoint := strings.TrimSuffix(g.base, "/v3") + "/graphql"
	if err := g.callURL(ctx, http.MethodPost, endpoint, map[string]any{"query": createCommitOnBranch, "variables": map[string]any{"input": input}}, &answer); err != nil {
		return "", err
	}
	if len(answer.Errors) > 0 {
		var msgs []string
		for _, e := range answer.Errors {
			msgs = append(msgs, e.Message)
		}
		return "", &Error{Service: settings.ForgeGitHub, Method: http.MethodPost, URL: endpoint, StatusCode: http.StatusOK, Status: "200 OK (GraphQL errors)", Message: g.scrubText(cut(strings.Join(msgs, "; ")))}
	}
	oid := answer.Data.CreateCommitOnBranch.Commit.OID
	if oid == "" {
		return "", fmt.Errorf("POST %s: createCommitOnBranch answered no commit", endpoint)
	}
	return oid, nil
}
