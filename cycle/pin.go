package cycle

import (
	"context"
	"fmt"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// Pin is how a chosen tag is pinned by digest (settings.DigestPin): the
// mode, and where the digest a tag points at now is asked. The zero Pin
// pins nothing.
type Pin struct {
	Mode settings.DigestPin
	// Digest asks the registry where the tag points, never from what it
	// learnt before: a pin must name what the tag is now.
	Digest func(ctx context.Context, tag string) (string, error)
}

// Choice is what an image's choice goes through besides its strategy:
// the stage it is promoted from, its minimum release age, then its pin.
type Choice struct {
	Age Age
	Pin Pin
	// promote restricts the choice to the stage's version.
	promote *promotion
}

// Choose chooses as policy does, among the stage's version alone when
// the image is promoted and among the versions old enough for c.Age, then
// pins the choice as c.Pin says (the digest strategy pins already, and a
// promoted version takes the stage's digest). Waiting is what holds a
// newer version back, if anything does.
func Choose(ctx context.Context, policy *strategy.Policy, tags []string, current imageref.Version, meta strategy.MetadataFunc, c Choice) (strategy.Result, *Waiting, error) {
	if p := c.promote; p != nil {
		if p.wait != nil {
			return strategy.Result{Seen: len(tags), Tag: current.Tag, Digest: current.Digest, Reason: p.wait.String()}, p.wait, nil
		}
		tags = p.only(tags, current)
	}
	res, err := policy.Choose(ctx, tags, current, meta)
	if err != nil {
		return res, nil, err
	}
	res, waiting, err := c.Age.apply(ctx, policy, tags, current, meta, res)
	if err != nil {
		return res, waiting, err
	}
	if p := c.promote; p != nil && p.version.Digest != "" {
		return p.digest(res, current), waiting, nil
	}
	if policy.Name() == strategy.Digest {
		return res, waiting, nil
	}
	res, err = c.Pin.apply(ctx, res, current)
	return res, waiting, err
}

// apply gives res the digest its tag points at. A choice of the running
// tag is an update only when the pin it gets differs from the running
// one: a first pin, or, with PinAlways, a tag pushed again.
func (p Pin) apply(ctx context.Context, res strategy.Result, current imageref.Version) (strategy.Result, error) {
	if p.Mode == settings.PinNever || res.Tag == "" {
		return res, nil
	}
	same := res.Tag == current.Tag
	if same && current.Digest != "" && p.Mode == settings.PinIfNotPresent {
		res.Digest = current.Digest
		return res, nil
	}
	d, err := p.Digest(ctx, res.Tag)
	if err == nil && d == "" {
		err = fmt.Errorf("the registry gave no digest")
	}
	if err != nil {
		return strategy.Result{}, fmt.Errorf("pinning tag %s by digest: %w", res.Tag, err)
	}
	res.Digest = d
	switch {
	case !same:
	case d == current.Digest:
		res.Update = false
		res.Reason = fmt.Sprintf("tag %q is pinned to %s, where it points", current.Tag, d)
	default:
		res.Update, res.Reason = true, ""
	}
	return res, nil
}
