package ecr

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecr "github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/ecr/types"

	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
)

// maxPushTimePages bounds the DescribeImages pages read for one query.
const maxPushTimePages = 20

// PushTimes gives when each of tags of the repository on the ECR registry
// host was pushed (DescribeImages' imagePushedAt), with the controller's
// own AWS identity, in the host's region; base, when not "", is the API's
// endpoint (else the SDK's, which AWS_ENDPOINT_URL_ECR sets). Pages are
// read until every tag is found, at most maxPushTimePages of 1,000
// images. A tag not listed is missing from the map.
func (p *Provider) PushTimes(ctx context.Context, host, repository, base string, tags []string) (map[string]time.Time, error) {
	account, region, ok := cloudhost.ECR(host)
	if !ok {
		return nil, fmt.Errorf("ecr: %s is not an Amazon ECR registry host", host)
	}
	client, err := p.client(ctx, region, "")
	if err != nil {
		return nil, fmt.Errorf("ecr: load AWS configuration for %s: %w", host, err)
	}
	var opts []func(*awsecr.Options)
	if base != "" {
		opts = append(opts, func(o *awsecr.Options) { o.BaseEndpoint = aws.String(base) })
	}
	want := map[string]bool{}
	for _, t := range tags {
		want[t] = true
	}
	found := map[string]time.Time{}
	in := &awsecr.DescribeImagesInput{
		RegistryId:     aws.String(account),
		RepositoryName: aws.String(repository),
		Filter:         &types.DescribeImagesFilter{TagStatus: types.TagStatusTagged},
		MaxResults:     aws.Int32(1000),
	}
	for page := 0; page < maxPushTimePages && len(found) < len(want); page++ {
		out, err := client.DescribeImages(ctx, in, opts...)
		if err != nil {
			return nil, fmt.Errorf("ecr: push times of %s/%s: %w", host, repository, err)
		}
		for _, img := range out.ImageDetails {
			if img.ImagePushedAt == nil {
				continue
			}
			for _, t := range img.ImageTags {
				if want[t] {
					found[t] = *img.ImagePushedAt
				}
			}
		}
		if out.NextToken == nil || *out.NextToken == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	return found, nil
}
