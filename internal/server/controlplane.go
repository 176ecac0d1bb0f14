package server

import (
	"context"
	"fmt"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
)

// managerControl is the controlapi.ControlPlane of one process: a service.Manager.
type managerControl struct{ m *service.Manager }

func (mc managerControl) Create(ctx context.Context, spec *servicejson.Service) (service.Info, error) {
	return mc.m.Create(ctx, spec)
}

func (mc managerControl) Update(ctx context.Context, name string, spec *servicejson.Service) (service.Info, error) {
	return mc.m.Update(ctx, name, spec)
}

func (mc managerControl) Describe(ctx context.Context, name string) (service.Info, error) {
	return mc.m.Describe(ctx, name)
}

func (mc managerControl) List(ctx context.Context) ([]service.Info, error) {
	var out []service.Info
	for _, svc := range mc.m.List() {
		out = append(out, svc.Info(ctx))
	}
	return out, nil
}

func (mc managerControl) Start(ctx context.Context, name string) (service.Info, error) {
	return mc.m.Start(ctx, name)
}

func (mc managerControl) Stop(ctx context.Context, name string) (service.Info, error) {
	return mc.m.Stop(ctx, name)
}

func (mc managerControl) Delete(ctx context.Context, name string) error {
	return mc.m.Delete(ctx, name)
}

func (mc managerControl) SwitchVersion(ctx context.Context, name string, v int) (service.Info, error) {
	return mc.m.SwitchVersion(ctx, name, v)
}

func (mc managerControl) get(name string) (*service.Service, error) {
	svc, ok := mc.m.Get(name)
	if !ok {
		return nil, fmt.Errorf("service %q: %w", name, service.ErrNotFound)
	}
	return svc, nil
}

func (mc managerControl) Events(_ context.Context, name string) ([]controlapi.EventObject, error) {
	svc, err := mc.get(name)
	if err != nil {
		return nil, err
	}
	out := []controlapi.EventObject{}
	for _, e := range svc.Events() {
		out = append(out, controlapi.EventObject(e))
	}
	return out, nil
}

func (mc managerControl) Instances(_ context.Context, name string) ([]controlapi.InstanceObject, error) {
	svc, err := mc.get(name)
	if err != nil {
		return nil, err
	}
	out := []controlapi.InstanceObject{}
	if live, ok := svc.Acquire(); ok {
		depth := live.Scheduler.QueueDepth()
		for i := range live.Instances() {
			out = append(out, controlapi.InstanceObject{
				InstanceName: fmt.Sprintf("%s-v%d-%d", svc.Name, live.Version, i),
				Status:       "Running",
				Version:      live.Version,
				StartTime:    live.Started,
				QueueDepth:   depth,
			})
		}
		live.Release()
	}
	return out, nil
}

func (mc managerControl) Versions(ctx context.Context, name string) (controlapi.VersionList, error) {
	svc, err := mc.get(name)
	if err != nil {
		return controlapi.VersionList{}, err
	}
	info := svc.Info(ctx)
	out := controlapi.VersionList{ServiceName: svc.Name, CurrentVersion: info.CurrentVersion, LatestVersion: info.LatestVersion, Versions: []controlapi.VersionObject{}}
	for _, v := range svc.Versions() {
		out.Versions = append(out.Versions, controlapi.NewVersionObject(v))
	}
	return out, nil
}
