// Package sigstoretest signs as cosign does, for the tests of signature
// verification: in-toto statements in sigstore bundles, with a key or
// keyless from a virtual Sigstore (sigstore-go's testing CA), and the
// trusted root an operator would write for it. It stands apart from
// testenv so that only the tests that sign link sigstore-go's signer.
package sigstoretest

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	intotov1 "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Statement is an in-toto statement with digest as its one subject and an
// empty predicate of predicateType, built as cosign builds it: with
// cosign's predicate https://sigstore.dev/cosign/sign/v1 it is what
// `cosign sign` signs in the bundle format; with another, an attestation.
func Statement(t testing.TB, digest v1.Hash, predicateType string) []byte {
	t.Helper()
	st := &intotov1.Statement{
		Type:          intotov1.StatementTypeUri,
		Subject:       []*intotov1.ResourceDescriptor{{Digest: map[string]string{digest.Algorithm: digest.Hex}}},
		PredicateType: predicateType,
		Predicate:     &structpb.Struct{},
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SignBundle signs statement with keypair into a sigstore bundle, with
// sigstore-go's signer as `cosign sign --new-bundle-format` does: a DSSE
// envelope of the in-toto statement, verification material from opts (a
// certificate provider, timestamp authorities) or the key's hint. It
// returns the bundle's JSON.
func SignBundle(t testing.TB, statement []byte, keypair sign.Keypair, opts sign.BundleOptions) []byte {
	t.Helper()
	content := &sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"}
	b, err := sign.Bundle(content, keypair, opts)
	if err != nil {
		t.Fatalf("sign bundle: %v", err)
	}
	out, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
